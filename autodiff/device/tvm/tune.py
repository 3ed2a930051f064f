"""Opt-in auto-tuning (``compile(..., tune=True)``): meta_schedule on the matmul kernels.

Only fused kernels holding a ``dot`` block are tuned (elementwise kernels gain little and
would spend the trials). Records go to a JSON database in :func:`cache_dir`; a kernel
whose workload already has a record there is not tuned again, so a model shape is tuned
once per machine and target. Builder workers each import TVM (about 15 s on a small
machine), hence the raised builder timeout. The cost model is XGBoost when ``xgboost`` is
installed, else random search.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import tempfile

import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from .te_ops import DOT_BLOCK

BUILDER_TIMEOUT_S = 300.0
RUNNER_TIMEOUT_S = 60.0


def cache_dir(target: "tvm.target.Target") -> pathlib.Path:
    """``$AUTODIFF_CACHE`` or ``$XDG_CACHE_HOME/autodiff`` (default ``~/.cache/autodiff``),
    then ``tvm/<target hash>``: one tuning database per target."""
    root = os.environ.get("AUTODIFF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "autodiff")
    key = hashlib.sha1(str(target).encode()).hexdigest()[:12]
    path = pathlib.Path(root) / "tvm" / key
    path.mkdir(parents=True, exist_ok=True)
    return path


def database(target) -> "ms.database.JSONDatabase":
    """The persistent tuning database for ``target``."""
    return ms.database.JSONDatabase(work_dir=str(cache_dir(target)))


def _is_matmul_task(task) -> bool:
    return f'T.sblock("{DOT_BLOCK}' in task.dispatched[0].script()


def _tuned(db, task) -> bool:
    mod = task.dispatched[0]
    return db.has_workload(mod) and db.query_tuning_record(
        mod, task.target, task.task_name) is not None


def tune_module(mod, target, trials: int = 64, cost_model: str | None = None):
    """Tune ``mod``'s untuned matmul kernels and apply every record in the database.

    Parameters
    ----------
    mod : tvm.IRModule
        The fused Relax module.
    target : tvm.target.Target
        An ``llvm`` target with ``num-cores`` set.
    trials : int
        meta_schedule trials for this run (shared by the kernels tuned now).
    cost_model : {"xgb", "random"}, optional
        Default ``"xgb"`` if xgboost is installed, else ``"random"``.

    Returns
    -------
    mod : tvm.IRModule
        The module with tuned PrimFuncs (marked ``tirx.is_scheduled``).
    tuned : int
        Kernels that now have a tuned schedule.
    trials_run : int
        Trials spent in this call (0 when every kernel was in the database).
    """
    db = database(target)
    tasks = [t for t in ms.relax_integration.extract_tasks(mod, target) if _is_matmul_task(t)]
    todo = [t for t in tasks if not _tuned(db, t)]
    trials_run = 0
    if todo and trials > 0:
        if cost_model is None:
            cost_model = "xgb" if importlib.util.find_spec("xgboost") else "random"
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            extracted_tasks=todo, work_dir=str(cache_dir(target)))
        per_task = max(trials // len(todo), 1)
        with tempfile.TemporaryDirectory() as work:
            ms.tune_tasks(tasks=contexts, task_weights=weights, work_dir=work,
                          max_trials_global=per_task * len(todo), max_trials_per_task=per_task,
                          num_trials_per_iter=min(per_task, 64), database=db,
                          builder=ms.builder.LocalBuilder(timeout_sec=BUILDER_TIMEOUT_S),
                          runner=ms.runner.LocalRunner(timeout_sec=RUNNER_TIMEOUT_S),
                          cost_model=cost_model)
        trials_run = per_task * len(todo)
    with target, db:
        mod = relax.transform.MetaScheduleApplyDatabase()(mod)
    tuned = sum(1 for t in tasks if _tuned(db, t))
    return mod, tuned, trials_run
