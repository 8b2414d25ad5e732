import sys

from jupyter_gpuaas.job_pod.runner import main

sys.exit(main())
