"""The local web app (``gpuarch serve``): pages and a JSON API over the command line.
Needs Flask (``pip install 'gpuarch[web]'``)."""
