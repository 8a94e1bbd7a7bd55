"""Helpers shared by tests in more than one directory, importable as ``testkit.*`` (the
``tests`` folder is on pytest's ``pythonpath``). Each module needs only what the tests
that use it have installed: ``run_files`` numpy and popmarl's files, ``team_configs``
plain dicts."""
