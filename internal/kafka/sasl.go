package kafka

// SASLMechanisms are the SASL mechanisms the embedded broker serves for
// each of its users, and that the public kafkaclient.Security accepts.
var SASLMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
