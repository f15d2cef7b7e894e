"""The repository's root folder, for tests that read its files."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
