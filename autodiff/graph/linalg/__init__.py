"""Matrix factorisations and the functions built on them (``autodiff.linalg``'s
implementations): each unrolled over the matrix size while tracing, as compositions of the
graph's ops with PyTorch's analytic gradients -- LU with partial pivoting (:mod:`.lu`,
:mod:`.lu_factor`), Cholesky and triangular solves (:mod:`.triangular`), Householder QR
(:mod:`.qr`), cyclic Jacobi for symmetric eigenproblems (:mod:`.eigh`) -- and the norms and
products composed of existing ops (:mod:`.norms`)."""
