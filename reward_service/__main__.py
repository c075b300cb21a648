"""``python -m reward_service serve ...``"""

import sys

from reward_service.cli import main

sys.exit(main())
