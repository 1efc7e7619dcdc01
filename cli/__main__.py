import sys

from logway.cli.main import main

sys.exit(main())
