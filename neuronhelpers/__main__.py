import sys

from neuronhelpers.cli.main import main

sys.exit(main())
