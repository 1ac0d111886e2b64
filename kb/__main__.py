from kb.cli import main

main()
