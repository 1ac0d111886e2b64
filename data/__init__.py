"""casebook's bundled data, installed as the package `casebook_data` (see pyproject.toml); read it with kb.config.data_path."""
