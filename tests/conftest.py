import sys
from pathlib import Path

from hypothesis import settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Properties are checked by what they compute, never by how long an example takes: a shared 2-core CI machine
# runs some examples slower than hypothesis's default 200 ms deadline.
settings.register_profile("simulon", deadline=None)
settings.load_profile("simulon")
