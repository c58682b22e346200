# Python binding tests: PYTHONPATH=python /usr/bin/python3 -m unittest discover -s tests/python -t . -v
