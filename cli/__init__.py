"""casebook's command line: `kb` (cli.kb) and `agent` (cli.agent), thin layers over the library. This package sits
above every stage, so a command may use any of them."""
