import sys

from jupyter_gpuaas.job.runner import main

sys.exit(main())
