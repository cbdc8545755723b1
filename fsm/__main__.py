from fsm.cli import main

main()
