// Package ossecret opens the ObjectStack platform's sys_secret values, as
// the platform's LocalCryptoProvider (package @objectstack/service-settings
// 17.4) seals them: AES-256-GCM under one 32-byte key (the platform's
// OS_SECRET_KEY: 64 hex characters, or base64 of 32 bytes), the
// ciphertext column holding base64(nonce 12 bytes ‖ tag 16 bytes ‖
// encrypted bytes), and the UTF-8 of namespace + "|" + key as additional
// authenticated data, so a value moved to another row does not open.
//
// Rows whose kms_key_id starts with "local:" (local:v1, and local:vN after
// a rotation, all under the same key) are opened; any other kms_key_id
// names an external KMS, which this package does not reach.
//
// Errors name the secret's id and the reason, never a byte of the key, the
// ciphertext or the plaintext.
package ossecret
