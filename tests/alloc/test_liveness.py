"""Liveness over hand-built procedural programs, and against an unrolled simulation."""
from __future__ import annotations

from alloc_programs import buf, ew, feed, partial, program, recv
from hypothesis import given, settings
from hypothesis import strategies as st

from autodiff.alloc.liveness import liveness, writes_whole
from autodiff.procedural.ir import BufferKind, Copy, For


def spans(prog, **kw):
    return {r.buffer: (r.start, r.end) for r in liveness(prog, **kw).ranges}


def test_straight_chain_each_buffer_lives_from_write_to_last_read():
    x, a, b, c = buf("x", kind=BufferKind.FEEDER), buf("a"), buf("b"), buf("c")
    prog = program([feed(x), ew(a, x), ew(b, a), ew(c, b, a), recv(c)], x, a, b, c)
    assert spans(prog) == {"x": (0, 1), "a": (1, 3), "b": (2, 3), "c": (3, 4)}


def test_loop_temporaries_live_within_one_iteration_and_captures_to_loop_end():
    w = buf("w", kind=BufferKind.PARAM)
    c, x, t1, t2, after = buf("c"), buf("x", kind=BufferKind.FEEDER), buf("t1"), buf("t2"), buf("z")
    body = [feed(x),            # 1
            ew(t1, x, c),       # 2  c: defined before the loop, read inside
            ew(t2, t1, w),      # 3
            ew(w, t2),          # 4  parameter update (not planned)
            recv(t2)]           # 5
    prog = program([ew(c, w), For(range(3), body), ew(after, w)], w, c, x, t1, t2, after)
    got = spans(prog)
    assert "w" not in got                          # params are not in the arena
    assert got["c"] == (0, 5)                      # to the loop's end
    assert got["x"] == (1, 2) and got["t1"] == (2, 3) and got["t2"] == (3, 5)
    assert got["z"] == (6, 6)


def test_loop_carried_temporary_lives_across_the_whole_loop():
    init, acc, x, y = (buf("init", kind=BufferKind.FEEDER), buf("acc"),
                       buf("x", kind=BufferKind.FEEDER), buf("y"))
    body = [feed(x),            # 2
            ew(y, acc, x),      # 3  reads last iteration's acc
            Copy(y, acc),       # 4  writes acc for the next iteration
            recv(x)]            # 5
    prog = program([feed(init), Copy(init, acc), For(range(4), body), recv(acc)],
                   init, acc, x, y)
    got = spans(prog)
    assert got["acc"] == (1, 6)     # from its first write, across the loop, to its last read
    assert got["y"] == (3, 4) and got["x"] == (2, 5) and got["init"] == (0, 1)


def test_value_written_in_loop_and_read_after_lives_from_write_to_read():
    x, t, r = buf("x", kind=BufferKind.FEEDER), buf("t"), buf("r", kind=BufferKind.RECEIVER)
    prog = program([For(range(5), [feed(x), ew(t, x)]), Copy(t, r), recv(r)], x, t, r)
    assert spans(prog) == {"x": (0, 1), "t": (1, 2), "r": (2, 3)}


def test_nested_loops():
    outer_t, inner_t, x = buf("o"), buf("i"), buf("x", kind=BufferKind.FEEDER)
    inner = For(range(2), [feed(x), ew(inner_t, x, outer_t), recv(inner_t)], "i1")
    prog = program([For(range(3), [ew(outer_t, outer_t), inner])],
                   outer_t, inner_t, x)
    got = spans(prog)
    assert got["o"] == (0, 3)       # loop-carried in the outer loop (reads itself)
    assert got["i"] == (2, 3) and got["x"] == (1, 2)


def test_partial_write_keeps_the_older_value_live():
    a, c, x = buf("a"), buf("c"), buf("x", kind=BufferKind.FEEDER)
    # a's second half is never written in the loop: its value must survive from before
    prog = program([feed(x), Copy(x, a), For(range(3), [ew(c, x), partial(a, c), recv(a)])],
                   a, c, x)
    assert spans(prog)["a"] == (1, 4)
    # the same partial write with nothing before the loop: live from the program's start
    prog = program([feed(x), For(range(3), [ew(c, x), partial(a, c), recv(a)])], a, c, x)
    assert spans(prog)["a"] == (0, 3)
    # whereas a whole write in the body ends it there
    prog = program([feed(x), For(range(3), [ew(c, x), ew(a, c), recv(a)])], a, c, x)
    assert spans(prog)["a"] == (2, 3)


# -- property: ranges cover every step a value is needed at, found by unrolling -------------

@st.composite
def programs(draw):
    names = [f"b{i}" for i in range(draw(st.integers(1, 6)))]
    bufs = {n: buf(n) for n in names}

    def stmts(depth):
        out = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["copy", "ew", "partial", "recv", "for"] if depth < 2
                                        else ["copy", "ew", "partial", "recv"]))
            pick = lambda: bufs[draw(st.sampled_from(names))]  # noqa: E731
            if kind == "copy":
                out.append(Copy(pick(), pick()))
            elif kind == "ew":
                out.append(ew(pick(), pick(), pick()))
            elif kind == "partial":
                out.append(partial(pick(), pick()))
            elif kind == "recv":
                out.append(recv(pick()))
            else:
                out.append(For(range(draw(st.integers(0, 3))), stmts(depth + 1)))
        return out
    return program(stmts(0), *bufs.values())


def unrolled(stmts, step_of):
    """Execution trace: (step, statement) per executed statement, loops unrolled."""
    for s in stmts:
        if isinstance(s, For):
            for _ in s.range:
                yield from unrolled(s.body, step_of)
        else:
            yield step_of[id(s)], s


@settings(max_examples=300, deadline=None)
@given(programs())
def test_ranges_cover_every_needed_step_of_an_unrolled_run(prog):
    live = liveness(prog)
    step_of = {id(s): t for t, s in enumerate(live.steps)}
    trace = list(unrolled(prog.body, step_of))
    ranges = {r.buffer: r for r in live.ranges}
    last_write: dict[str, int] = {}
    for u, (t, s) in enumerate(trace):
        for b in s.reads():
            w = last_write.get(b.name, 0)       # unwritten: needed from the program start
            needed = [trace[k][0] for k in range(w, u + 1)] if trace else []
            r = ranges[b.name]
            assert all(r.start <= k <= r.end for k in needed), (b.name, needed, r)
        for b in s.writes():
            assert ranges[b.name].start <= t <= ranges[b.name].end
            if writes_whole(s, b):      # after a partial write the older value is still needed
                last_write[b.name] = u
