import sys

from logway.gateway.cli import main

sys.exit(main())
