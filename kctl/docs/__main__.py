import sys

from kctl.docs import main

sys.exit(main())
