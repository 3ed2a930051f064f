import pytest

import autodiff


@pytest.fixture(autouse=True)
def _fresh_program():
    """Every test starts and ends with an empty traced program."""
    autodiff.reset()
    yield
    autodiff.reset()
