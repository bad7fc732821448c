export { startEmbeddedPostgres, freePort, type EmbeddedOptions, type EmbeddedPostgres } from './server.js';
export { locateBinaries, type PostgresBinaries, type ServerBinaries } from './binaries.js';
