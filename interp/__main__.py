from interp.cli import main

raise SystemExit(main())
