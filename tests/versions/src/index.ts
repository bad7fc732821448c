export { PG13_PACKAGE, locatePg13, startPg13, type Pg13Binaries, type Pg13Lookup, type Pg13Server } from './pg13.js';
