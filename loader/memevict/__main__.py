from memevict.cli import main

main()
