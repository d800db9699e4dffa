// A throwaway self-signed client certificate and its key, and the key of another (P-256, valid
// until 2126; no secret: made for these tests with `openssl req -x509 -newkey ec -pkeyopt
// ec_paramgen_curve:prime256v1 -nodes -days 36500 -subj /CN=mq-cli-test`), for the checks mq
// makes of --tls-cert and --tls-key before it connects.

export const TEST_CERT_PEM = `
-----BEGIN CERTIFICATE-----
MIIBgzCCASmgAwIBAgIUOAe0nsE8uemlIBVAS+JXRsxeRFAwCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLbXEtY2xpLXRlc3QwIBcNMjYxMjA3MDkzNjQ2WhgPMjEyNjEx
MTMwOTM2NDZaMBYxFDASBgNVBAMMC21xLWNsaS10ZXN0MFkwEwYHKoZIzj0CAQYI
KoZIzj0DAQcDQgAEgP35RFeqtN83fEtI/aHXzMmT92GeGgIjP7PP5+cHY3YhYsEM
2CzCWhPP55muBhfjTrLsGLQfHxf4Fm3ZFVjz9qNTMFEwHQYDVR0OBBYEFDDmqtY0
valWN1LFBkmen8FZsrLoMB8GA1UdIwQYMBaAFDDmqtY0valWN1LFBkmen8FZsrLo
MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIhAMiK7Lw7JJzSItft
KMxL9fZ8YCC8PGqmk41q6loO98VnAiBTuDdxXW6UnxH1Glo+pdNhrYBdBDY0ka0n
Z6gJFqKvkQ==
-----END CERTIFICATE-----
`

export const TEST_KEY_PEM = `
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgDssy+yYVI+tLGw2B
UnHGQKMTZxUB+M/wfuvk+m7h4lqhRANCAASA/flEV6q03zd8S0j9odfMyZP3YZ4a
AiM/s8/n5wdjdiFiwQzYLMJaE8/nma4GF+NOsuwYtB8fF/gWbdkVWPP2
-----END PRIVATE KEY-----
`

/** The key of another certificate. */
export const OTHER_KEY_PEM = `
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgEKnd9cq9qVX3w65i
j7IuTg+/za+h+YYLZtfFAtZYOkWhRANCAARq6UZodbB7UufmuEhdt4OqHcqZowMX
O5W2DiKFOg1MuBm5i8sxI7mo5HIS3UweQcGrNCVvZPTcWKKx58vw6Eu2
-----END PRIVATE KEY-----
`
