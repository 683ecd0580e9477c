from docsctl.cli.app import main

main()
