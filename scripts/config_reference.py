"""Write the scenario format's reference, docs/spec/config-{datacenter,workload,collective}.md, from simulon's config
models (simulon.config.reference); tests/docs/test_config_reference.py checks the committed pages against it.

    uv run python scripts/config_reference.py
"""

from __future__ import annotations

from pathlib import Path

from simulon.config.reference import BLOCKS, reference

SPEC = Path(__file__).resolve().parents[1] / "docs" / "spec"


def main() -> None:
    SPEC.mkdir(parents=True, exist_ok=True)
    for block in BLOCKS:
        path = SPEC / f"config-{block}.md"
        path.write_text(reference(block))
        print(f"wrote {path.relative_to(SPEC.parents[1])}")


if __name__ == "__main__":
    main()
