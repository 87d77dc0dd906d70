from vikingbot.cli.app import main

main()
