"""Groups of ``Tensor`` methods, one module per family, mixed into :class:`autodiff.Tensor`."""
