/**
 * Whether `text` can travel as a gRPC metadata (HTTP/2 header) value: grpc-js takes printable
 * ASCII only, and throws on anything else where the call is made.
 */
export function isMetadataValue(text: string): boolean {
  return /^[ -~]*$/.test(text)
}
