"""`python -m placer.precompile`: compile ahead what `placer run` compiles at start-up, where the
installation is read-only at run time (the container image's build step, after `compileall`).

`compileall` compiles the modules; this imports what `placer run` imports, so that the methods
`@dataclass` generates are compiled too, and writes them to `placer.dataclass_cache`'s file even
under PYTHONDONTWRITEBYTECODE (an explicit request). Exit 1 when the file cannot be written.
"""

from __future__ import annotations

import sys

from placer import dataclass_cache


def main() -> int:
    from placer.controller.main import _import_engine, _import_kopf_side

    _import_engine()
    _import_kopf_side()
    if not dataclass_cache.save(force=True):
        print(f"placer.precompile: cannot write {dataclass_cache.cache_path()}", file=sys.stderr)
        return 1
    used = len(dataclass_cache.install().used)
    print(f"placer.precompile: {used} dataclass methods compiled in {dataclass_cache.cache_path()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
