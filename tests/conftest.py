import sys
from pathlib import Path

# the helpers of the test suite (notebook_tools) are imported by name
sys.path.insert(0, str(Path(__file__).resolve().parent))
