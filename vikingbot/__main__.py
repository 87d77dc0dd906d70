from vikingbot.cli.launch import main

main()
