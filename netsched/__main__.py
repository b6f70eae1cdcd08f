from netsched.cli import main

raise SystemExit(main())
