from fmcluster.cli import main

main()
