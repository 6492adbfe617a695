"""Runs the example of bindings/python/README.md (the block after its
"<!-- example" marker) with the io_harness that this interpreter imports:
make test-wheel runs it with a venv holding only the built wheel, after
mypy --strict checks it against the installed package's types.

    python tests/readme.py [--mypy PATH_TO_MYPY]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")


def example() -> str:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    if not m:
        raise SystemExit("no example block in README.md")
    return m.group(1)


def main() -> None:
    path = os.path.abspath("readme_example.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(example())
    if len(sys.argv) > 2 and sys.argv[1] == "--mypy":
        r = subprocess.run([sys.argv[2], "--strict", "--no-incremental", "--cache-dir", os.devnull,
                            "--python-executable", sys.executable, path], capture_output=True, text=True)
        print("mypy:", r.stdout.strip())
        if r.returncode != 0:
            raise SystemExit("mypy found errors in the README example:\n" + r.stdout + r.stderr)
    env = {k: v for k, v in os.environ.items() if k not in ("IO_HARNESS_LIB", "PYTHONPATH", "LD_LIBRARY_PATH")}
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=300)
    print(r.stdout, end="")
    if r.returncode != 0 or "success" not in r.stdout:
        raise SystemExit(f"the README example failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    import io_harness  # noqa: the one the example ran with

    print("ran with", io_harness.load().path)


if __name__ == "__main__":
    main()
