import sys

from ddbench.cli import main

sys.exit(main())
