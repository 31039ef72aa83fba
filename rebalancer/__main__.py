import sys

from rebalancer.cli.main import main

sys.exit(main())
