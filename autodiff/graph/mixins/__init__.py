"""Families of ``Tensor`` methods, one mixin class per file (tinygrad's layout)."""
