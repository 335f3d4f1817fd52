"""The committed `_specs.py` must be exactly what `gen_specs` makes from the installed kio."""

from pathlib import Path

from samsa.protocol import gen_specs


def test_generated_specs_are_current() -> None:
    committed = Path(gen_specs.TARGET).read_text()
    assert committed == gen_specs.generate(), "run: python -m samsa.protocol.gen_specs"
