import BeacondApp
BeacondMain.main()
