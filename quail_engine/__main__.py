import sys

from quail_engine.cli import main

sys.exit(main())
