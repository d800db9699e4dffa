export type { ErrorCodeInfo } from './errors'
export { ERROR_CODES, ErrorCode, GrpcStatus, isErrorCode } from './errors'
