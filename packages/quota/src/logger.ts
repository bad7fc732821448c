// The logger is shared by every q package; see @q/otel.
export { errorFields, firstLine, silentLogger, type Logger } from '@q/otel';
