import os
import sys

# fakes.py beside the tests, importable however pytest is started
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
