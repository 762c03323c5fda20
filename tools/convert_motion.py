"""Convert motion files to this package's npz; the same as ``mimic-rl convert`` (kept for scripts that call it).

python tools/convert_motion.py IN [IN ...] --output DIR_OR_FILE [--robot g1.xml] [--csv-fps 30] [--fps 50]
"""

from __future__ import annotations

import sys

from mimic_rl.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["convert", *sys.argv[1:]]))
