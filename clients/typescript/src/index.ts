// The package's entry: the client and every type of the API's bodies and answers.
export * from "./client";
export * from "./api";
