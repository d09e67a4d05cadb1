from fmcluster.cli.app import main

main()
