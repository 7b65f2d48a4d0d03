import sys

from courseware.cli import main

sys.exit(main())
