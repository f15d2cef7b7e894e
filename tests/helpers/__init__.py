"""What several test files share: tables, readers and builds they import
(fixtures stay in the conftest.py files)."""
