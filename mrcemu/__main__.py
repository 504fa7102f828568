from mrcemu.cli import main

main()
